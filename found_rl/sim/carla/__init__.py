"""The CARLA backend: a CARLA server's world as WorldSnapshots, and the supervisor of its servers.

Needs the optional ``carla`` client (``pip install 'found-rl[carla]'``) and a running server
for the backend; the supervisor (``found-rl carla up|down|status``) needs neither package.
"""
