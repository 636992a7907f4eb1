"""One module per framework for what all of that framework's notebooks would otherwise repeat.

Every module has the same names, so that knowing one is knowing them all:

    choose_device(device)   the framework's device for the notebook's `device` parameter ("auto", "cpu",
                            "cuda"); "cuda" without a usable GPU raises common.environment.DeviceError
    set_variant(dev, precision, compile_mode)
                            the run's variant (common/variants.py): the float32 policy of
                            common/environment.py (TF32 where the GPU has it and precision allows),
                            mixed precision, the compiler; returns the precision computed in, or raises
                            common.variants.Unsupported where the framework or device cannot (MXNet's
                            also takes the task: some of its variants depend on the model)
    start_record(...)       a result record with the device and the environment facts as the framework
                            reports them (version, GPUs, CUDA, cuDNN, threads, precision)
    probe()                 for the runner after a build: can the framework compute on the GPU?

The notebooks keep what a reader of the framework learns from: which device, the autotune switch, how
to wait for the GPU before a timer stops. Like `common`, modules here run on Python 3.6 (CNTK) to 3.12;
each imports only its own framework.
"""
