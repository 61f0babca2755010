"""What a person sees: the graph model and its layout, SVG and HTML pictures, the run report,
text and Mermaid renderings, the console of a running pipeline.
"""
