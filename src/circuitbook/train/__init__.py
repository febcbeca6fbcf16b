"""Training: the Vaswani et al. recipe, the toy language models' loop, the toy translation model.

One file per concept; everything is re-exported here, so chapters write
``from circuitbook.train import train_lm``.

- ``vaswani``:     Adam(0.9, 0.98, 1e-9), the Noam schedule, label smoothing (chapter 19)
- ``lm``:          ``lm_loss`` (the mean of ``circuitbook.loss.per_token_loss``, re-exported here), ``train_lm``, ``repeat_losses``, ``InductionMetrics`` (chapters 14-19)
- ``translation``: training the zoo's toy translation model and its metrics (chapter 19)
- ``text``:        ``TextMetrics``, the training record of the zoo's text models (chapter 19)
- ``phases``:      half-rise step, windowed loss slopes, ICL score: the induction bump (chapter 19)

Building the zoo (``circuitbook.models.zoo`` holds only its registry and loader) lives here too,
imported by module, not re-exported:

- ``streams``:     each recipe's training data (``batch_fn``, ``text_streams``, ``text_heldout``)
- ``metrics``:     the metrics each checkpoint's json records, recomputed from the weights (``evaluate``)
- ``build``:       training, target checks and saving: ``python -m circuitbook.train.build [names...]``
"""

from __future__ import annotations

from circuitbook.train.lm import (
    InductionMetrics,
    lm_loss,
    make_optimizer,
    phase_change_step,
    repeat_losses,
    train_lm,
)
from circuitbook.train.translation import (
    ZOO_CONFIG,
    calibration,
    loss_compute,
    model_from_config,
    train_translation,
    train_translation_zoo_model,
    translation_metrics,
)
from circuitbook.loss import per_token_loss  # the book's one next-token loss, for the chapters
from circuitbook.train.vaswani import VASWANI_BETAS, VASWANI_EPS, LabelSmoothing, noam_lr, vaswani_adam

__all__ = [
    "VASWANI_BETAS",
    "VASWANI_EPS",
    "noam_lr",
    "vaswani_adam",
    "LabelSmoothing",
    "lm_loss",
    "per_token_loss",
    "make_optimizer",
    "train_lm",
    "repeat_losses",
    "InductionMetrics",
    "phase_change_step",
    "ZOO_CONFIG",
    "model_from_config",
    "loss_compute",
    "train_translation",
    "train_translation_zoo_model",
    "calibration",
    "translation_metrics",
]
