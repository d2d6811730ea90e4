"""The commands on the performance models: models (accuracy, devices, kernels), validate, calibrate."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daydream.commands.arguments import CORES, integer
from daydream.commands.output import print_json, tables_console
from daydream.errors import DaydreamError

if TYPE_CHECKING:
    from daydream.commands.arguments import Commands


def add_models(sub: Commands) -> None:
    models = sub.add_parser("models", help="the performance models: their accuracy, the device catalog")
    msub = models.add_subparsers(dest="models_command", metavar="WHAT", required=True)
    acc = msub.add_parser("accuracy", help="each model's error (GMAE) on data it was not fitted on")
    acc.add_argument(
        "traces",
        metavar="TRACE",
        nargs="*",
        help="traces or directories to cross-check on as well (ranks of one job in one directory)",
    )
    acc.add_argument("--json", action="store_true", help='print {"models": [{"name", "gmae_pct", "n", "data"}]}')
    acc.set_defaults(func=_cmd_models_accuracy)
    dev = msub.add_parser("devices", help="the device catalog (kernels/devices.toml)")
    dev.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    dev.set_defaults(func=_cmd_models_devices)
    ker = msub.add_parser(
        "kernels", help="the device-swap kernel model: its error per class and GPU, each GPU left out"
    )
    ker.add_argument("--json", action="store_true", help='print {"data", "anchors", "accuracy": [...]}')
    ker.add_argument(
        "--refit",
        metavar="DATA",
        nargs="+",
        help="refit on data sets of measured kernels (NeuSight layout, "
        "or a GPU's kernel tables such as kernels/data/h100-sxm: each GPU and class from the first that "
        "has it; needs scikit-learn: pip install 'daydream-whatif[calibrate]') and write the model to --out",
    )
    ker.add_argument(
        "--out",
        metavar="FILE",
        help="where --refit writes the model (default: the shipped one, daydream/kernels/data/device_model.json)",
    )
    ker.add_argument(
        "--classes",
        default="gemm,conv,elementwise,norm",
        metavar="LIST",
        help="the kernel classes --refit fits (default: all four)",
    )
    ker.set_defaults(func=_cmd_models_kernels)


def add_validate(sub: Commands) -> None:
    val = sub.add_parser("validate", help="predict measured changes and compare: the accuracy ledger")
    val.add_argument(
        "cases",
        metavar="CASES.toml",
        nargs="?",
        default=None,
        help="cases file (default: validation/cases.toml); see daydream.api.validate for its format",
    )
    val.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    val.add_argument(
        "--jobs",
        type=integer,
        default=1,
        metavar="N",
        help=f"worker processes, each taking one BEFORE setting's cases at a time (default 1; {CORES})",
    )
    val.add_argument(
        "--errors-out",
        default=None,
        metavar="FILE.json",
        help="write the ledger's errors by script, which prediction intervals read (daydream ships "
        "kernels/data/ledger_errors.json, written so from validation/cases.toml)",
    )
    val.set_defaults(func=_cmd_validate)


def add_calibrate(sub: Commands) -> None:
    cal = sub.add_parser(
        "calibrate", help="measure kernel tables with torch on this machine and fit the MLP kernel models"
    )
    cal.add_argument("--device", default="cpu", help="cpu or cuda (cuda:N) (default: cpu)")
    cal.add_argument(
        "--kernels", default="gemm,elementwise", help="comma-separated tables to measure (default: gemm,elementwise)"
    )
    cal.add_argument(
        "--out", default="calibration", metavar="DIR", help="where the tables and models go (default: ./calibration)"
    )
    cal.add_argument(
        "--quick", action="store_true", help="a few shapes and runs: checks the setup in seconds, not a usable model"
    )
    cal.add_argument(
        "--threads", type=integer, default=None, metavar="N", help="torch CPU threads (default: torch's setting)"
    )
    cal.set_defaults(func=_cmd_calibrate)


def _cmd_models_accuracy(args: argparse.Namespace) -> int:
    from daydream.perf.accuracy_report import model_accuracy
    from daydream.presentation.terminal import render_accuracy

    rows = model_accuracy(args.traces)
    if args.json:
        print_json({"models": [r.to_dict() for r in rows]})
    else:
        render_accuracy(rows, tables_console())
    return 0


def _cmd_models_devices(args: argparse.Namespace) -> int:
    from daydream.perf.kernels.devices import load_catalog
    from daydream.presentation.terminal import render_devices

    catalog = load_catalog()
    if args.json:
        print_json({"devices": [_device_dict(d) for d in catalog.values()]})
    else:
        render_devices(list(catalog.values()), tables_console())
    return 0


def _cmd_models_kernels(args: argparse.Namespace) -> int:
    import msgspec

    from daydream.perf.kernels import device_model
    from daydream.presentation.terminal import render_kernel_model

    if args.out and not args.refit:
        raise DaydreamError("--out is where --refit writes the model: give --refit DATA")
    if args.refit:
        classes = [c.strip() for c in args.classes.split(",") if c.strip()]
        unknown = sorted(set(classes) - set(device_model.CLASSES))
        if unknown or not classes:
            raise DaydreamError(f"--classes {args.classes}: the classes are {', '.join(device_model.CLASSES)}")
        from daydream.files import check_output_path

        out = args.out or device_model.MODEL_PATH
        data = [str(p) for root in args.refit for p in Path(root).glob("**/*") if p.is_file()]
        check_output_path(out, data, "--out")  # never onto the data
        model = device_model.refit(
            args.refit,
            out,
            classes,
            progress=None
            if args.json
            else lambda r: print(
                f"  {r.kernel_class} without {r.target}: "
                f"{r.calibrated_gmae_pct:.1f}% (roofline {r.roofline_gmae_pct:.1f}%)",
                file=sys.stderr,
                flush=True,
            ),
        )
    else:
        model = device_model.shipped_model()
        if model is None:
            raise DaydreamError(f"no device model at {device_model.MODEL_PATH}: refit one with --refit DATA")
    if args.json:
        print_json(
            {
                "data": model.data,
                "dtype": model.dtype,
                "shrink": model.shrink,
                "anchors": msgspec.to_builtins(model.anchors),
                "accuracy": msgspec.to_builtins(model.accuracy),
            }
        )
    else:
        render_kernel_model(model, tables_console())
    return 0


def _device_dict(d: Any) -> dict[str, Any]:
    from dataclasses import asdict

    out = asdict(d)
    out["peak_tflops"] = dict(d.peak_tflops)
    return out


def _cmd_validate(args: argparse.Namespace) -> int:
    from daydream.api.validate import DEFAULT_CASES, load_cases, validate
    from daydream.files import check_output_path
    from daydream.perf.trust.uncertainty import write_table
    from daydream.presentation.terminal import render_ledger

    cases = args.cases or DEFAULT_CASES
    if args.errors_out is not None:  # never onto the cases file, a trace of it or a script it names
        from daydream.dsl.library import script_inputs

        loaded = load_cases(cases)
        inputs = [
            cases,
            *(t for c in loaded for t in (*c.before, *c.after)),
            *script_inputs({s for c in loaded for s in c.scripts}),
        ]
        check_output_path(args.errors_out, inputs, "--errors-out")
    ledger = validate(cases, jobs=args.jobs)
    if args.errors_out is not None:
        write_table(args.errors_out, ledger.errors())
    if args.json:
        print_json(ledger.to_dict())
    else:
        render_ledger(ledger, tables_console())
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from daydream.perf.kernels import mlp
    from daydream.presentation.terminal import render_accuracy

    console = tables_console(stderr=True)
    kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
    fitted = mlp.calibrate(
        args.out,
        kernels,
        args.device,
        quick=args.quick,
        threads=args.threads,
        progress=lambda line: console.print(line, highlight=False, markup=False),
    )
    for path, _ in fitted:
        console.print(f"model written to {path}", highlight=False, markup=False)
    render_accuracy([acc for _, acc in fitted], tables_console())
    return 0
