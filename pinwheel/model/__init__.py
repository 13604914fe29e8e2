"""The typed values the manifest's loader produces and the step kinds consume, below both.

- source: the manifest file, read within bounds, composed into YAML nodes with lines;
- reader: typed getters over those nodes that raise located errors (file:line: key: message);
- manifest: the Manifest and its parts (image, gates, variants, shared pins; each step in its kind's model);
- packages: a distribution as the manifest pins it and as a Plan installs it.

Nothing here imports the step kinds, the loader or the Plan.
"""
