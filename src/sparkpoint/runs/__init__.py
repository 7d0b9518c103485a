"""Driver runs: a job's drivers taking turns at it, and every request a driver makes.

Registration (active or standby), grants, heartbeats and their numbered notices,
acknowledgements, declines, restore plans, release and supersession. One implementation
(``job_runs``), below both the service (the REST API) and the pipeline (the embedded
channel); docs/architecture.md, "Driver runs".

Import from the modules: ``messages`` is light (executors load it through the pipeline
package), the rest brings the coordinator.
"""
