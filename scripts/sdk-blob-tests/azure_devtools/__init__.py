"""A stand-in for azure-devtools' ``scenario_tests``, as much of it as the oldest suites import
(see ../devtools_testutils/mgmt_era.py). Written for Tabulae's harness."""
