"""ember.amp.GradScaler: loss scaling for training in half precision.

float16 has 5 exponent bits: gradients below about 6e-8 flush to zero.
Multiplying the loss by a large `scale` before backward() multiplies every
gradient by it too, lifting small gradients into range; `unscale_` divides
them back before the optimizer uses them.  Too large a scale overflows to
inf, so each step checks the unscaled gradients: a step with an inf or NaN
is skipped and the scale shrinks (`backoff_factor`); after
`growth_interval` clean steps in a row it grows (`growth_factor`).

The API and the per-optimizer state machine follow PyTorch's
torch.amp.GradScaler (READY -> UNSCALED -> STEPPED, reset by update()).
"""

import enum
import warnings
from collections import defaultdict

import ember

__all__ = ["GradScaler", "OptState"]


class OptState(enum.Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_optimizer_state():
    return {"stage": OptState.READY, "found_inf": None}


class GradScaler:
    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        self._device = str(device)
        self._enabled = enabled
        if self._device == "cuda" and enabled and not ember.cuda.is_available():
            warnings.warn("ember.cuda.amp.GradScaler is enabled, but CUDA is not "
                          "available.  Disabling.", stacklevel=2)
            self._enabled = False
        if not self._enabled:
            return
        if growth_factor <= 1.0:
            raise AssertionError("The growth factor must be > 1.0.")
        if backoff_factor >= 1.0:
            raise AssertionError("The backoff factor must be < 1.0.")
        self._init_scale = init_scale
        self._scale = None            # a float32 tensor of shape (), made by scale()
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._init_growth_tracker = 0
        self._growth_tracker = None   # int32 count of clean steps in a row
        self._per_optimizer_states = defaultdict(_fresh_optimizer_state)

    # ----------------------------------------------------------- scaling

    def is_enabled(self):
        return self._enabled

    def _lazy_init_scale_growth_tracker(self):
        self._scale = ember.full((), self._init_scale, dtype=ember.float32)
        self._growth_tracker = ember.full((), self._init_growth_tracker, dtype=ember.int32)

    def scale(self, outputs):
        """`outputs` (a tensor, or tensors nested in lists/tuples) times the scale."""
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._lazy_init_scale_growth_tracker()
        if isinstance(outputs, ember.Tensor):
            return outputs * self._scale.to(outputs.dtype)
        if isinstance(outputs, (list, tuple)):
            scaled = [self.scale(item) for item in outputs]
            return scaled if isinstance(outputs, list) else type(outputs)(scaled)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _check_scale_growth_tracker(self, funcname):
        message = ("Attempted {} but _scale is None.  This may indicate your script did "
                   "not use scaler.scale(loss or outputs) earlier in the iteration.")
        if self._scale is None:
            raise AssertionError(message.format(funcname))
        return self._scale, self._growth_tracker

    def _unscale_grads_(self, optimizer, inv_scale, allow_fp16):
        """Multiplies every gradient by inv_scale; a float32 flag of shape (),
        1.0 when any gradient held an inf or NaN."""
        found_inf = ember.zeros((), dtype=ember.float32)
        with ember.no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if param.grad is None:
                        continue
                    if not allow_fp16 and param.grad.dtype == getattr(ember, "float16", None):
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    grad = param.grad
                    if not bool(ember.isfinite(grad).all()):
                        found_inf.fill_(1.0)
                    grad.mul_(inv_scale.to(grad.dtype))
        return found_inf

    def unscale_(self, optimizer):
        """Divides `optimizer`'s gradients by the scale (once per step)."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer "
                               "since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        # The reciprocal in float64, then float32, as PyTorch computes it.
        inv_scale = ember.tensor(1.0 / self._scale.double().item(), dtype=ember.float32)
        state["found_inf"] = self._unscale_grads_(optimizer, inv_scale, allow_fp16=False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) unless a gradient is inf or NaN;
        returns what it returned, or None when the step was skipped."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler "
                               "is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if state["found_inf"] is None:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        result = None
        if not state["found_inf"].item():
            result = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return result

    def update(self, new_scale=None):
        """Ends the iteration: sets the scale to `new_scale`, or shrinks it
        after a skipped step and grows it after growth_interval clean ones."""
        if not self._enabled:
            return
        scale, growth_tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            self._set_scale(new_scale)
        else:
            found_infs = [state["found_inf"] for state in self._per_optimizer_states.values()
                          if state["found_inf"] is not None]
            if not found_infs:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(found.item() for found in found_infs):
                scale.mul_(self._backoff_factor)
                growth_tracker.fill_(0)
            elif growth_tracker.item() + 1 == self._growth_interval:
                grown = scale * self._growth_factor
                if bool(ember.isfinite(grown)):   # a scale never grows to inf
                    scale.copy_(grown)
                growth_tracker.fill_(0)
            else:
                growth_tracker.add_(1)
        self._per_optimizer_states = defaultdict(_fresh_optimizer_state)

    def _set_scale(self, new_scale):
        if isinstance(new_scale, float):
            self._scale.fill_(new_scale)
            return
        reason = ("new_scale should be a float or a 1-element ember.FloatTensor "
                  "with requires_grad=False.")
        if (not isinstance(new_scale, ember.Tensor) or new_scale.numel() != 1
                or new_scale.requires_grad):
            raise AssertionError(reason)
        self._scale.copy_(new_scale.reshape(()))

    # ----------------------------------------------------------- settings

    def get_scale(self):
        """The current scale as a Python float (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale.item()

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        if self._growth_tracker is None:
            return self._init_growth_tracker
        return self._growth_tracker.item()

    def state_dict(self):
        """PyTorch's keys; {} when disabled."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was "
                               "saved from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])
