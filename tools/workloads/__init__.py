"""Standalone scripts run on the target host by its ML interpreter; they never import eyas.

They are uploaded together (eyas.tools.jobs.upload) into `<workdir>/workloads/`, so a script may import a
sibling such as `progress` by its plain module name.
"""
