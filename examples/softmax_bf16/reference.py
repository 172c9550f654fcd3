"""kbench's reference command for softmax.toml: each row's softmax in float32, from the inputs.

A bf16 input reaches this script as float32 (kbench writes bfloat16 buffers as float32, which
holds every bfloat16 exactly), so the same code serves the bf16 and f32 cases; kbench compares
the kernel's output with these values within the buffer's tolerance.
"""

import json
import os

import numpy as np

inputs, outputs = os.environ["KBENCH_INPUTS"], os.environ["KBENCH_OUTPUTS"]
params = json.loads(os.environ["KBENCH_PARAMS"])
rows, cols = params["rows"], params["cols"]
x = np.load(os.path.join(inputs, "x.npy")).astype(np.float32).reshape(rows, cols)
e = np.exp(x - x.max(axis=1, keepdims=True))
np.save(os.path.join(outputs, "y.npy"), e / e.sum(axis=1, keepdims=True))
