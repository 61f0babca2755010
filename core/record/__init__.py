"""What a run leaves behind: outcomes settled from the run state, the receipt and its git
facts, resume, lineage and trackers, the list of past runs.
"""
