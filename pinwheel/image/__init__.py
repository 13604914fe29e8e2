"""The image stages: the engine adapter, bootstrap bases, build, smoke and publish."""
