"""Conversion throughput: PDF and DOCX pages per second, in-process and through the sandbox.

Makes a PDF of N pages (headings, CJK and English prose, a table) with fpdf2 and a DOCX of the
same text (a "page" there is the same amount of text, about 600 characters), then converts each
R times in this process, R times through ``convert_isolated`` (a child process per file: a single
upload's indexing) and R times through one ``ConversionSandbox`` (one child reused for every
file: a batch indexing run), and prints pages/s and the sandboxes' cost over in-process, measured
in the same run. Prints figures only.

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
from knowledge.converters.sandbox import ConversionSandbox, convert_isolated
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


def rate(label: str, pages: int, repeat: int, run) -> float:
    run()  # warm: imports, fonts (and, for the reused sandbox, its child)
    started = time.perf_counter()
    for _ in range(repeat):
        run()
    seconds = (time.perf_counter() - started) / repeat
    print(f"  {label:<38} {seconds * 1000:8.0f} ms per file  {pages / seconds:8.1f} pages/s")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    limits = Limits()
    pdf = files.pdf_bytes(pages=args.pages)
    docx = docx_of(args.pages)
    print(f"{args.pages}-page files: PDF {len(pdf):,} bytes, DOCX {len(docx):,} bytes")
    for fmt, data, library in (("pdf", pdf, "pypdfium2"), ("docx", docx, "python-docx")):
        name = fmt.upper()
        alone = rate(
            f"{name} in-process ({library})",
            args.pages,
            args.repeat,
            lambda d=data, f=fmt: convert(d, fmt=f, limits=limits),
        )
        per_file = rate(
            f"{name} sandboxed, a child per file",
            args.pages,
            args.repeat,
            lambda d=data, f=fmt: convert_isolated(d, fmt=f, limits=limits, timeout=120, memory_mb=1024),
        )
        with ConversionSandbox(limits=limits, timeout=120, memory_mb=1024) as sandbox:
            reused = rate(
                f"{name} sandboxed, one child reused",
                args.pages,
                args.repeat,
                lambda d=data, f=fmt, s=sandbox: s.convert(d, fmt=f),
            )
            children = sandbox.children_started
        print(
            f"    {name}: a child per file costs {per_file / alone:.2f}x in-process, one reused child "
            f"{reused / alone:.2f}x ({children} child for {args.repeat + 1} files)"
        )


if __name__ == "__main__":
    main()
