"""Conversion throughput: PDF and DOCX pages per second, in-process and through the sandbox.

Makes a PDF of N pages (headings, CJK and English prose, a table) with fpdf2 and a DOCX of the
same text (a "page" there is the same amount of text, about 600 characters), then converts each
R times in this process and R times through ``convert_isolated`` (a child process per file, as
the worker runs it) and prints pages/s. Prints figures only.

    .venv/bin/python bench/convert.py --pages 50 --repeat 3
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from knowledge.converters import Limits, convert
from knowledge.converters.sandbox import convert_isolated
from tests.support import documents as files


def docx_of(pages: int) -> bytes:
    import docx

    document = docx.Document()
    for page in range(1, pages + 1):
        document.add_heading(f"第{page}章 支付超时 Chapter {page}", 1)
        document.add_paragraph(
            ("当用户支付超时，请检查回调签名与网关状态。Refund callbacks are retried. ") * 8
        )
        table = document.add_table(rows=3, cols=3)
        for i, row in enumerate(files.TABLE_ROWS):
            for j, value in enumerate(row):
                table.cell(i, j).text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def rate(label: str, pages: int, repeat: int, run) -> None:
    run()  # warm: imports, fonts
    started = time.perf_counter()
    for _ in range(repeat):
        run()
    seconds = (time.perf_counter() - started) / repeat
    print(f"  {label:<34} {seconds * 1000:8.0f} ms per file  {pages / seconds:8.1f} pages/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    limits = Limits()
    pdf = files.pdf_bytes(pages=args.pages)
    docx = docx_of(args.pages)
    print(f"{args.pages}-page files: PDF {len(pdf):,} bytes, DOCX {len(docx):,} bytes")
    rate(
        "PDF in-process (pypdfium2)", args.pages, args.repeat, lambda: convert(pdf, fmt="pdf", limits=limits)
    )
    rate(
        "PDF sandboxed (child process)",
        args.pages,
        args.repeat,
        lambda: convert_isolated(pdf, fmt="pdf", limits=limits, timeout=120, memory_mb=1024),
    )
    rate(
        "DOCX in-process (python-docx)",
        args.pages,
        args.repeat,
        lambda: convert(docx, fmt="docx", limits=limits),
    )
    rate(
        "DOCX sandboxed (child process)",
        args.pages,
        args.repeat,
        lambda: convert_isolated(docx, fmt="docx", limits=limits, timeout=120, memory_mb=1024),
    )


if __name__ == "__main__":
    main()
