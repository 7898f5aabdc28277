"""Reading an upload: zips (names, junk, limits) and folders on disk, before anything is stored."""

import io
import zipfile

import pytest

from knowledge.services.uploads import UploadRejected, folder_items, upload_items, zip_items


def _zip(entries: dict[str, bytes], *, raw_names: dict[str, bytes] | None = None) -> bytes:
    """A zip; ``raw_names`` stores some names as given bytes without the UTF-8 flag (as Windows
    zip tools on a Chinese system write GBK names)."""
    raw_names = raw_names or {}
    buffer = io.BytesIO()
    real = zipfile.ZipInfo._encodeFilenameFlags

    def encode(info):
        if info.filename in raw_names:
            return raw_names[info.filename], info.flag_bits & ~0x800
        return real(info)

    zipfile.ZipInfo._encodeFilenameFlags = encode
    try:
        with zipfile.ZipFile(buffer, "w") as archive:
            for name, data in entries.items():
                archive.writestr(name, data)
    finally:
        zipfile.ZipInfo._encodeFilenameFlags = real
    return buffer.getvalue()


def test_gbk_file_names_from_windows_zip_tools_are_read_right():
    data = _zip({"payment/x.md": b"# x"}, raw_names={"payment/x.md": "支付/退款指南.md".encode("gbk")})
    (item,) = zip_items(data)
    assert item.name == "支付/退款指南.md" and item.folder_domain == "支付"


def test_utf8_names_and_junk_entries():
    data = _zip(
        {
            "payment/退款.md": b"# r",
            "__MACOSX/payment/._退款.md": b"\x00",
            "payment/.DS_Store": b"\x00",
            "Thumbs.db": b"\x00",
            "top.md": b"# t",
        }
    )
    items = zip_items(data)
    assert [(i.name, i.folder_domain) for i in items] == [("payment/退款.md", "payment"), ("top.md", None)]


def test_other_file_types_become_failed_rows_not_a_rejection():
    (item,) = zip_items(_zip({"docs/diagram.png": b"\x89PNG"}))
    assert "not a supported format" in item.skip_reason


def test_a_single_upload_is_named_by_its_file_name_only():
    (item,) = upload_items([("C:\\Users\\me\\notes\\pool.md", b"# p")])
    assert item.name == "pool.md" and item.folder_domain is None


def test_nothing_to_upload_is_refused():
    with pytest.raises(UploadRejected, match="no files"):
        upload_items([])


def test_a_folder_names_files_by_their_path_below_it(tmp_path, settings):
    (tmp_path / "payment" / "sub").mkdir(parents=True)
    (tmp_path / "payment" / "sub" / "a.md").write_text("# a")
    (tmp_path / "root.md").write_text("# r")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD.md").write_text("x")
    settings.INGEST_MAX_FILE_BYTES = 10
    (tmp_path / "payment" / "big.md").write_text("x" * 11)

    items = {i.name: i for i in folder_items([tmp_path])}

    assert set(items) == {"payment/sub/a.md", "payment/big.md", "root.md"}
    assert items["payment/sub/a.md"].folder_domain == "payment" and items["root.md"].folder_domain is None
    # On disk an oversized file fails on its own (the operator's bulk path), it does not stop the rest.
    assert "INGEST_MAX_FILE_BYTES" in items["payment/big.md"].skip_reason
