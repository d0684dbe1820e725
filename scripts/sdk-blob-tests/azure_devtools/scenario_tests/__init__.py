import random
import string


class AzureTestError(Exception):
    pass


class RecordingProcessor:
    """A recording's rewriter: nothing is recorded live."""

    def process_request(self, request):
        return request

    def process_response(self, response):
        return response


def create_random_name(prefix="aztest", length=24):
    tail = "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(length - len(prefix)))
    return prefix + tail
