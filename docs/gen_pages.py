"""Pages generated while the docs site builds (mkdocs-gen-files): the command-line reference, from
the argparse parser itself, and the layout pictures, from ``npupack explain``. Generated, they cannot
drift from the code."""
import contextlib
import io

import mkdocs_gen_files

from npupack.cli import build_parser, main


def _subcommands(parser):
    for action in parser._actions:  # argparse keeps its subparsers here and nowhere public
        if action.__class__.__name__ == "_SubParsersAction":
            return action.choices
    return {}


def _run(argv):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        status = main(argv)
    if status:  # a picture whose command fails must fail the build, not leave an empty block
        raise RuntimeError(f"npupack {' '.join(argv)} exited {status}")
    return buf.getvalue().rstrip()


parser = build_parser()
with mkdocs_gen_files.open("cli.md", "w") as f:
    f.write("# Command line\n\nGenerated from the `npupack` argument parser. Exit status of pack, pack-many "
            "and verify: 0 when every layer and operand the options ask for was packed (integer operands left "
            "out for lack of `--calibration` are one warning line); 1 when a layer, operand, model or check "
            "failed; 2 for a usage error, an unreadable model or a refused output folder; 3 when layers or "
            "operands were left out as unsupported (0 with `--allow-partial`); 130 when interrupted.\n\n")
    f.write("```text\n" + parser.format_help().rstrip() + "\n```\n")
    for name, sub in _subcommands(parser).items():
        f.write(f"\n## npupack {name}\n\n```text\n{sub.format_help().rstrip()}\n```\n")

PICTURES = [
    ("OpenVINO `b_fs_yx_fsv16`, (b, f, y, x) = (2, 2, 2, 2)",
     ["explain", "b_fs_yx_fsv16", "--shape", "2,2,2,2", "--limit", "20"]),
    ("OpenVINO `os_is_yx_isv16_osv16` weights, (o, i, y, x) = (20, 18, 1, 1)",
     ["explain", "os_is_yx_isv16_osv16", "--shape", "20,18,1,1", "--limit", "12"]),
    ("oneDNN `nChw16c`, (N, C, H, W) = (1, 20, 2, 2)",
     ["explain", "nChw16c", "--shape", "1,20,2,2", "--limit", "12"]),
    ("Kneron `1W16C8B` on KL720, (N, C, H, W) = (1, 20, 2, 3)",
     ["explain", "kneron:1W16C8B", "--chip", "kl720", "--shape", "1,20,2,3", "--limit", "12"]),
    ("NVDLA feature data on nv_small, int8, (N, C, H, W) = (1, 10, 1, 2)",
     ["explain", "nvdla:feature", "--target", "nv_small", "--shape", "1,10,1,2"]),
    ("NVDLA DC weights on nv_full, int8, (K, C, R, S) = (2, 3, 2, 2)",
     ["explain", "nvdla:dc", "--shape", "2,3,2,2"]),
]
with mkdocs_gen_files.open("layouts.md", "w") as f:
    f.write("# Layout pictures\n\nWhere each element of a tensor goes, as `npupack explain` prints it: "
            "`i = <offset in elements> => [logical index] == [physical index]`, `padding` where no element "
            "lies. Generated from the code while these pages build.\n")
    for title, argv in PICTURES:
        try:
            text = _run(argv)
        except SystemExit as e:  # argparse refuses: a broken picture must fail the build, not vanish
            raise RuntimeError(f"npupack {' '.join(argv)} exited {e.code}") from e
        f.write(f"\n## {title}\n\n```text\n$ npupack {' '.join(argv)}\n{text}\n```\n")
