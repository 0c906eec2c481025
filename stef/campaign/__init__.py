"""Campaign mode (DESIGN.md §7, seeds/003): gold audit, sandboxed execution of agent answers on a
test database, and the classification of every run.
"""
