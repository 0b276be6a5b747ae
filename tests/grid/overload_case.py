"""A scenario with one overloaded branch at known times, shared by the branch and env tests."""

OVERLOAD = {
    "name": "overload_650632",
    "description": "openg2g-ieee13 with a ~1.2 MW site at 671 that is online from 20 s to 40 s only.",
    "duration_s": 60,
    "periods": {"datacenter_s": 1, "grid_s": 1, "control_s": 1},
    "grid": {"feeder": "openg2g-ieee13", "regulators": {"reg1": {"taps": [14, 6, 15]}}},
    "datacenters": [
        {
            "name": "dc1",
            "bus": "671",
            "base_load_kw_per_phase": 400,
            "models": [{"model": "Llama-3.1-8B", "gpus_per_replica": 1, "replicas": 8, "batch_size": 64}],
        }
    ],
    "events": [
        {"t_s": 0, "command": "set_site_online", "site": "dc1", "online": False},
        {"t_s": 20, "command": "set_site_online", "site": "dc1", "online": True},
        {"t_s": 40, "command": "set_site_online", "site": "dc1", "online": False},
    ],
    "outputs": {"branches": "all", "plots": False},
}
