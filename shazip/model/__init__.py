"""The model: the SHA-RNN in torch (`sharnn.py`, training and the float reference), its shape
(`config.py`) and file (`file.py`), the numerics contract's rules (`numerics.py`) and their
integers for a model (`exact.py`), the torch twin that runs them (`twin.py`, the reference every
native path is tested against) and the GPU's steps (`gpu.py`). The CPU engine is the native
core's (csrc/model/). Nothing here is imported with the package: the CPU path never loads torch.
"""
