"""How work reaches the workers: the one registry of queues and job handles (``queues``), handing requests to them in
bulk (``pipeline``), the stop signal long jobs check (``stopping``) and the scheduler's heartbeat
(``scheduler_ticks``).
"""
