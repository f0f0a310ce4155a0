"""Coding: the engines that run the neural model (int8 on the core, the torch twin, float32),
one block through the model and the stage (`block`), and frames made or decoded several at once."""
