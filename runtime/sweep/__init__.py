"""The sweep stage: a scenario's cells, the runner, local and Dask executors, the results database and the output folder."""
