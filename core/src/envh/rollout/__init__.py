"""Rollouts: policies, the episode runner, executors and the trajectory store."""
