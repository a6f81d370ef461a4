"""The families of tests of ``quicsm diff``, one module each (outcomes, states, transitions,
dwell, invariants), their one result schema and the policy that adjusts them."""
