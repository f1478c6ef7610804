"""Entry point: python -m recbench task=... model=... method=..."""
from recbench.app import main

if __name__ == "__main__":
    main()
