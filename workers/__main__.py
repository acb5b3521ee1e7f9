"""`python -m workers` runs the worker: every workflow and activity on the product's task queue."""

from workers.worker import main

main()
