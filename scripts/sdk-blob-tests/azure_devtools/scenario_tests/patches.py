def mock_in_unit_test(unit_test, target, replacement):
    """A replay patch (vcrpy's): nothing is replayed live."""
