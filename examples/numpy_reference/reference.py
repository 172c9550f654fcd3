"""kbench's reference command for saxpy.toml: the expected z = a x + y, in float64.

kbench writes the case's inputs as $KBENCH_INPUTS/<buffer>.npy, gives its axis values as a JSON
object in $KBENCH_PARAMS, and reads each expected output from $KBENCH_OUTPUTS/<buffer>.npy.
"""

import json
import os

import numpy as np

inputs, outputs = os.environ["KBENCH_INPUTS"], os.environ["KBENCH_OUTPUTS"]
a = json.loads(os.environ["KBENCH_PARAMS"])["a"]
x = np.load(os.path.join(inputs, "x.npy")).astype(np.float64)
y = np.load(os.path.join(inputs, "y.npy")).astype(np.float64)
np.save(os.path.join(outputs, "z.npy"), a * x + y)
