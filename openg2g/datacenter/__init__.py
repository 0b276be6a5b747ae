"""openg2g.datacenter"""
