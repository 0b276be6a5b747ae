"""openg2g.envs"""
