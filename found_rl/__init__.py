"""found-rl: autonomous-driving RL guided by foundation models.

Importing the package registers the gymnasium id ``found_rl/Driving-v0``.
"""

from gymnasium.envs.registration import register, registry

__version__ = "0.1.0"

DRIVING_ENV_ID = "found_rl/Driving-v0"

if DRIVING_ENV_ID not in registry:
    register(id=DRIVING_ENV_ID, entry_point="found_rl.env:DrivingEnv")
