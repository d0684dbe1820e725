import functools

from .. import _accepted, _hide_parameters


def recorded_by_proxy_async(func):
    @functools.wraps(func)
    async def wrapper(*args, **kwargs):
        return await func(*args, **_accepted(func, kwargs))

    return _hide_parameters(wrapper)
