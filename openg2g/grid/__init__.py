"""openg2g.grid"""
