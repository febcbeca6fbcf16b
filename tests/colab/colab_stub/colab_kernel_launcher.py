"""The simulated Colab kernel: like Colab's own launcher, it imports google.colab and then
starts the IPython kernel, so google.colab is in sys.modules before the first cell runs.

For the test only, ``colab_sim_watch`` first records every file the kernel process opens
under the folders named in ``COLAB_SIM_FORBIDDEN`` (the repository and its clone)."""

import colab_sim_watch  # noqa: F401  (before anything else is imported)
import google.colab  # noqa: F401
from ipykernel import kernelapp

if __name__ == "__main__":
    kernelapp.launch_new_instance()
