import inspect


def trim_kwargs_from_test_function(fn, kwargs):
    """Drop what the test does not take, unless it takes ``**kwargs`` or is a preparer."""
    if getattr(fn, "_is_preparer", False):
        return
    parameters = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    for key in [k for k in kwargs if k not in parameters]:
        del kwargs[key]
