"""bertkit.padding on tiny hand-written tensors: exact indices, cu_seqlens, packing order, zeros at padding, round
trips and gradients through both directions."""

import torch

from bertkit.padding import (Unpadding, gather_tokens, length_buckets, pad_heads, pad_input, unpad_input,
                             unpadding_indices)

# Three rows of width 4 with real lengths 2, 4 and 1; the values count positions so packing order is visible.
MASK = torch.tensor([[1, 1, 0, 0],
                     [1, 1, 1, 1],
                     [1, 0, 0, 0]])
HIDDEN = torch.arange(12.0).view(3, 4, 1) * torch.tensor([1.0, -1.0])  # (B=3, T=4, D=2): [p, -p] at flat position p


def test_unpadding_indices_are_exact():
    indices, cu_seqlens, max_seqlen = unpadding_indices(MASK)
    assert indices.tolist() == [0, 1, 4, 5, 6, 7, 8]
    assert indices.dtype == torch.int64
    assert cu_seqlens.tolist() == [0, 2, 6, 7] and cu_seqlens.dtype == torch.int32
    assert max_seqlen == 4


def test_unpad_input_keeps_real_tokens_in_row_order():
    packed, indices, cu_seqlens, max_seqlen = unpad_input(HIDDEN, MASK)
    assert packed.tolist() == [[0, 0], [1, -1], [4, -4], [5, -5], [6, -6], [7, -7], [8, -8]]
    assert indices.tolist() == [0, 1, 4, 5, 6, 7, 8] and cu_seqlens.tolist() == [0, 2, 6, 7] and max_seqlen == 4


def test_bool_and_int_masks_agree_and_2d_inputs_pack_to_1d():
    ids = torch.tensor([[5, 6, 0, 0], [7, 8, 9, 10], [11, 0, 0, 0]])
    packed, indices, _, _ = unpad_input(ids, MASK.bool())
    assert packed.tolist() == [5, 6, 7, 8, 9, 10, 11]
    assert torch.equal(indices, unpadding_indices(MASK)[0])
    assert gather_tokens(ids, indices).tolist() == [5, 6, 7, 8, 9, 10, 11]


def test_pad_input_puts_zeros_at_padding():
    packed = torch.tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0], [5.0, 5.0], [6.0, 6.0], [7.0, 7.0]])
    indices = torch.tensor([0, 1, 4, 5, 6, 7, 8])
    padded = pad_input(packed, indices, batch=3, seqlen=4)
    assert padded.shape == (3, 4, 2)
    assert padded[..., 0].tolist() == [[1, 2, 0, 0], [3, 4, 5, 6], [7, 0, 0, 0]]
    assert pad_input(packed[:, 0], indices, 3, 4).tolist() == [[1, 2, 0, 0], [3, 4, 5, 6], [7, 0, 0, 0]]


def test_round_trips():
    packed, indices, _, _ = unpad_input(HIDDEN, MASK)
    repadded = pad_input(packed, indices, 3, 4)
    assert torch.equal(repadded, HIDDEN * MASK.unsqueeze(-1))  # real tokens back in place, padding zeroed
    again, _, _, _ = unpad_input(repadded, MASK)
    assert torch.equal(again, packed)


def test_no_padding_is_identity():
    full = torch.ones(2, 3, dtype=torch.long)
    hidden = torch.randn(2, 3, 5)
    packed, indices, cu_seqlens, max_seqlen = unpad_input(hidden, full)
    assert torch.equal(packed, hidden.view(6, 5)) and indices.tolist() == list(range(6))
    assert cu_seqlens.tolist() == [0, 3, 6] and max_seqlen == 3
    assert torch.equal(pad_input(packed, indices, 2, 3), hidden)


def test_pad_heads_matches_pad_input_transposed():
    indices, _, _ = unpadding_indices(MASK)
    packed = torch.arange(7 * 2 * 3, dtype=torch.float32).view(7, 2, 3)  # (N=7, H=2, hd=3)
    heads = pad_heads(packed, indices, batch=3, seqlen=4)  # slots = row * 4 + column
    assert heads.shape == (3, 2, 4, 3) and heads.is_contiguous()  # (B, H, T, hd)
    assert torch.equal(heads, pad_input(packed, indices, 3, 4).transpose(1, 2))
    assert heads[2, :, 1:].abs().sum() == 0  # row 2 has one real token


def test_pad_heads_puts_groups_of_heads_first_each_contiguous():
    indices, _, _ = unpadding_indices(MASK)
    packed = torch.arange(7 * 3 * 2 * 4, dtype=torch.float32).view(7, 3, 2, 4)  # (N, G=3: q k v, H=2, hd=4)
    q, k, v = pad_heads(packed, indices, batch=3, seqlen=4)  # (3, B, H, T, hd) unbound
    for group, heads in enumerate((q, k, v)):
        assert heads.shape == (3, 2, 4, 4) and heads.is_contiguous()  # so (B, H) merge without a copy for bmm
        assert torch.equal(heads, pad_heads(packed[:, group], indices, 3, 4))


def test_gradients_flow_through_unpad_and_pad():
    hidden = HIDDEN.clone().requires_grad_(True)
    packed, indices, _, _ = unpad_input(hidden, MASK)
    weights = torch.arange(1.0, 8.0).unsqueeze(-1)  # (N, 1): a different weight per real token
    (packed * weights).sum().backward()
    expected = torch.zeros(12, 1)
    expected[indices] = weights
    assert torch.equal(hidden.grad[..., 0], expected.view(3, 4))  # padding positions get no gradient
    assert torch.equal(hidden.grad[..., 1], expected.view(3, 4))

    packed = torch.ones(7, 2, requires_grad=True)
    padded = pad_input(packed, indices, 3, 4)
    (padded * torch.arange(12.0).view(3, 4, 1)).sum().backward()
    assert packed.grad[:, 0].tolist() == [0, 1, 4, 5, 6, 7, 8]  # each token's gradient from its own padded slot


def test_gradients_flow_through_pad_heads():
    indices, _, _ = unpadding_indices(MASK)
    packed = torch.ones(7, 2, 3, requires_grad=True)
    heads = pad_heads(packed, indices, 3, 4)  # (B, H, T, hd)
    scale = torch.arange(4.0).view(1, 1, 4, 1)  # gradient = the token's column
    (heads * scale).sum().backward()
    assert packed.grad[:, 0, 0].tolist() == [0, 1, 0, 1, 2, 3, 0]


def test_length_buckets_round_lengths_up():
    seqlens = torch.tensor([10, 2, 5, 0, 1, 9, 3])
    assert [rows.tolist() for rows in length_buckets(seqlens, 3)] == [[1, 4, 6], [2], [5], [0]]  # ceil(L/3): 1 2 3 4
    assert [rows.tolist() for rows in length_buckets(seqlens, 16)] == [[0, 1, 2, 4, 5, 6]]  # the empty row in none


def test_unpadding_reads_packed_tokens_as_the_padded_batch():
    """Unpadding.first_tokens and select read the packed tokens as unpack(...)[:, :1] and unpack(...)[positions]."""
    left = MASK.flip(-1)  # left-padded: rows 0 and 2 have padding in column 0
    for mask in (MASK, left):
        unpadding = Unpadding.from_mask(mask)
        packed = unpadding.pack(HIDDEN)  # (N, 2)
        assert torch.equal(unpadding.first_tokens(packed), unpadding.unpack(packed)[:, :1])
        positions = torch.tensor([[0, 1, 0, 0], [1, 0, 0, 1], [1, 0, 0, 0]], dtype=torch.bool) & mask.bool()
        assert torch.equal(unpadding.select(packed, positions), unpadding.unpack(packed)[positions])
        on_padding = positions | ~mask.bool()  # selected padding positions read zeros
        assert torch.equal(unpadding.select(packed, on_padding), unpadding.unpack(packed)[on_padding])
