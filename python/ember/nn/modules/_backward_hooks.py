"""Module.register_full_backward_hook and register_full_backward_pre_hook.

A module's backward is not one graph node, so PyTorch (and ember) find it
by wrapping the module's tensor inputs and outputs in identity Functions:

    inputs -> [identity A] -> forward -> [identity B] -> outputs

In backward, B runs first and sees the gradients of the outputs: the
pre-hooks run there (and may replace them).  A runs once the gradients of
all inputs are known: the full hooks run there, with the inputs' gradients
and the outputs' gradients B recorded, and may replace the inputs'.  When
no input requires grad, A is not in the graph, so B calls the full hooks
with a grad_input of Nones.
"""

import warnings

import ember
from ember.autograd import Function


class _BackwardHookState:
    """One call's bookkeeping, shared by its two identity nodes."""

    def __init__(self, module, n_inputs, tensor_positions, inputs_need_grad):
        self.module = module
        self.n_inputs = n_inputs
        self.tensor_positions = tensor_positions   # positional index of each tensor input
        self.inputs_need_grad = inputs_need_grad
        self.grad_outputs = None

    def run_full_hooks(self, tensor_grads):
        """The full hooks on the inputs' gradients (one per tensor input);
        returns the gradients to pass on."""
        grad_input = [None] * self.n_inputs
        for position, grad in zip(self.tensor_positions, tensor_grads):
            grad_input[position] = grad
        grad_input = tuple(grad_input)
        for hook in list(self.module._backward_hooks.values()):
            result = hook(self.module, grad_input, self.grad_outputs)
            if result is None:
                continue
            if not self.inputs_need_grad:
                raise RuntimeError("Backward hook for Modules where no input requires "
                                   "gradient should always return None or None for all "
                                   "gradients.")
            result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
            if len(result) != len(grad_input):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, "
                                   f"got {len(result)}, but expected {len(grad_input)}")
            grad_input = result
        return [grad_input[position] for position in self.tensor_positions]

    def run_pre_hooks(self, grads):
        grads = tuple(grads)
        for hook in list(self.module._backward_pre_hooks.values()):
            result = hook(self.module, grads)
            if result is None:
                continue
            result = tuple(result) if isinstance(result, (tuple, list)) else (result,)
            if len(result) != len(grads):
                raise RuntimeError(f"Backward pre hook returned an invalid number of "
                                   f"grad_output, got {len(result)}, but expected {len(grads)}")
            grads = result
        self.grad_outputs = grads
        return grads


class _InputsIdentity(Function):
    @staticmethod
    def forward(ctx, state, *tensors):
        ctx.state = state
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.state.run_full_hooks(grads))


class _OutputsIdentity(Function):
    @staticmethod
    def forward(ctx, state, *tensors):
        ctx.state = state
        ctx.set_materialize_grads(False)
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        state = ctx.state
        grads = state.run_pre_hooks(grads)
        if not state.inputs_need_grad and state.module._backward_hooks:
            warnings.warn("Full backward hook is firing when gradients are computed with "
                          "respect to module outputs since no inputs require gradients. See "
                          "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                          "#torch.nn.Module.register_full_backward_hook for more details.")
            state.run_full_hooks([None] * len(state.tensor_positions))
        return (None, *grads)


def wrap_inputs(module, args):
    """(state, args with their tensors passed through the inputs' identity)."""
    positions = [i for i, arg in enumerate(args) if isinstance(arg, ember.Tensor)]
    tensors = [args[i] for i in positions]
    need_grad = ember.is_grad_enabled() and any(t.requires_grad for t in tensors)
    state = _BackwardHookState(module, len(args), positions, need_grad)
    if not need_grad or not module._backward_hooks:
        return state, args
    wrapped = _InputsIdentity.apply(state, *tensors)
    args = list(args)
    for position, tensor in zip(positions, wrapped):
        args[position] = tensor
    return state, tuple(args)


def wrap_outputs(state, output):
    """`output` with its tensors passed through the outputs' identity."""
    single = isinstance(output, ember.Tensor)
    items = [output] if single else output
    if not isinstance(items, (list, tuple)):
        return output
    positions = [i for i, item in enumerate(items) if isinstance(item, ember.Tensor)
                 and item.requires_grad]
    if not positions or not ember.is_grad_enabled():
        return output
    wrapped = _OutputsIdentity.apply(state, *[items[i] for i in positions])
    items = list(items)
    for position, tensor in zip(positions, wrapped):
        items[position] = tensor
    if single:
        return items[0]
    return type(output)(items) if isinstance(output, tuple) else items
