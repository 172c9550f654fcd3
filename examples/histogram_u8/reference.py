"""kbench's reference command for histogram.toml: the 256 bins of the input, counted by NumPy.

The input arrives as uint8 or float32 (`$KBENCH_INPUTS/data.npy`); a float's bin is its integer
part, at most 255, as the kernel's `bin_of`.
"""

import os

import numpy as np

inputs, outputs = os.environ["KBENCH_INPUTS"], os.environ["KBENCH_OUTPUTS"]
data = np.load(os.path.join(inputs, "data.npy"))
bins = np.minimum(data.astype(np.int64), 255)
np.save(os.path.join(outputs, "bins.npy"), np.bincount(bins, minlength=256).astype(np.uint32))
