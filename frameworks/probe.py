"""Run by the runner in an environment's own interpreter: can its framework compute on the GPU?

    python -m frameworks.probe pytorch

prints one line, PREFIX followed by JSON: {"framework", "version", "gpus", "gpu_ok", "error"}. An import
that fails is an answer too (gpu_ok false, the error's first line), so the probe itself exits 0.
"""

import importlib
import json
import sys

from common.results import first_line

PREFIX = "ROSETTA-PROBE "


def check_gpu(framework, version, gpus, why_no_gpu, matrix_product, cuda=None):
    """The probe's answer for a framework that sees `gpus`: `matrix_product()` must return the sum of a 64x64
    matrix of ones times itself (64 ** 3) computed on the first GPU; an exception is the framework's answer."""
    answer = {"framework": framework, "version": version, "cuda": cuda, "gpus": list(gpus), "gpu_ok": False,
              "error": None}
    if not gpus:
        answer["error"] = why_no_gpu()
        return answer
    try:
        answer["gpu_ok"] = float(matrix_product()) == 64.0 ** 3
        if not answer["gpu_ok"]:
            answer["error"] = "{} computed a wrong matrix product on the GPU".format(framework)
    except Exception as error:  # noqa: BLE001 - the framework's own first line is the answer
        answer["error"] = "{}: {}".format(type(error).__name__, first_line(str(error)))
    return answer


def main(argv=None):
    """Probe the framework module named in argv[0] and print its answer."""
    name = (sys.argv[1:] if argv is None else argv)[0]
    try:
        answer = importlib.import_module("frameworks." + name).probe()
    except Exception as error:  # noqa: BLE001 - whatever stops the framework is the answer
        answer = {"framework": name, "version": None, "gpus": [], "gpu_ok": False,
                  "error": "{}: {}".format(type(error).__name__, first_line(str(error)))}
    sys.stdout.write("\n" + PREFIX + json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
