import functools


def recorded_by_proxy_async(func):
    @functools.wraps(func)
    async def wrapper(*args, **kwargs):
        kwargs.pop("variables", None)
        return await func(*args, **kwargs)

    return wrapper
