"""The HTTP layer: the FastAPI app, its settings file, TLS material and the server process.

The face lists what other packages use; names are imported on first use (grid/fleet/faces.py),
so importing the face loads no FastAPI.
"""

from typing import TYPE_CHECKING

from grid.fleet.faces import lazy_face

if TYPE_CHECKING:
    from grid.api.client_keys import check_open_access
    from grid.api.ha_setup import join_store
    from grid.api.process import start_server, stop_server
    from grid.api.settings import (
        CONFIG_NAME,
        DEFAULT_HOST,
        DEFAULT_PORT,
        Settings,
        config_path,
        default_state_dir,
        load_or_create_settings,
        load_settings,
        write_settings,
    )
    from grid.api.tls import check_bind, check_server_files, generate_ca_and_server

# module -> the names it gives the face, separated by spaces
_EXPORTS: dict[str, str] = {
    "grid.api.client_keys": "check_open_access",
    "grid.api.ha_setup": "join_store",
    "grid.api.process": "start_server stop_server",
    "grid.api.settings": (
        "CONFIG_NAME DEFAULT_HOST DEFAULT_PORT Settings config_path default_state_dir"
        " load_or_create_settings load_settings write_settings"
    ),
    "grid.api.tls": "check_bind check_server_files generate_ca_and_server",
}

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "Settings",
    "check_bind",
    "check_open_access",
    "check_server_files",
    "config_path",
    "default_state_dir",
    "generate_ca_and_server",
    "join_store",
    "load_or_create_settings",
    "load_settings",
    "start_server",
    "stop_server",
    "write_settings",
]

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
