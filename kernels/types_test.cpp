// SPDX-License-Identifier: Apache-2.0
// A tensor view's geometry against an oracle that visits every element: numel
// counts the index tuples, span is the largest offset reached plus one (the
// memory a copy of the view must cover, no more and no less), and contiguous
// holds exactly when the row-major walk reaches the offsets 0, 1, 2, ... in
// order (for views with an element). Every shape and stride of rank 1 to 3
// with extents 0..3 and strides 0..7 is checked, then a few hand-written views.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/types.hpp"

namespace pav::kernels {
namespace {

struct Walk {
  int64_t count = 0, max_offset = -1;
  bool in_order = true;
};

Walk walk(const TensorView& v) {
  Walk w;
  if (v.rank == 0) return w;
  std::function<void(int, int64_t)> visit = [&](int dim, int64_t offset) {
    if (dim == v.rank) {
      w.in_order = w.in_order && offset == w.count;
      ++w.count;
      w.max_offset = std::max(w.max_offset, offset);
      return;
    }
    for (int64_t i = 0; i < v.shape[dim]; ++i) visit(dim + 1, offset + i * v.stride[dim]);
  };
  visit(0, 0);
  return w;
}

TensorView view(std::vector<int64_t> shape, std::vector<int64_t> stride) {
  TensorView v;
  v.dtype = DType::f32;
  v.rank = int(shape.size());
  for (int i = 0; i < v.rank; ++i) {
    v.shape[i] = shape[i];
    v.stride[i] = stride[i];
  }
  return v;
}

TEST(TensorViewGeometry, MatchesAWalkOverEveryElement) {
  int64_t checked = 0;
  for (int rank = 1; rank <= 3; ++rank) {
    std::vector<int64_t> shape(rank, 0), stride(rank, 0);
    std::function<void(int)> each = [&](int d) {
      if (d == rank) {
        const TensorView v = view(shape, stride);
        const Walk w = walk(v);
        SCOPED_TRACE(v.shape_string() + " strides " + ::testing::PrintToString(stride));
        ASSERT_EQ(v.numel(), w.count);
        ASSERT_EQ(v.span(), w.max_offset + 1);
        if (w.count > 0) {  // an empty view's layout is moot
          ASSERT_EQ(v.contiguous(), w.in_order);
        }
        ++checked;
        return;
      }
      for (shape[d] = 0; shape[d] <= 3; ++shape[d])
        for (stride[d] = 0; stride[d] <= 7; ++stride[d]) each(d + 1);
    };
    each(0);
  }
  EXPECT_EQ(checked, 32 + 32 * 32 + 32 * 32 * 32);
}

TEST(TensorViewGeometry, HandWrittenViews) {
  EXPECT_EQ(TensorView{}.span(), 0);  // absent
  EXPECT_EQ(TensorView{}.numel(), 0);
  float buf[24];
  const TensorView c = TensorView::contiguous_of(buf, DType::f32, {2, 3, 4});
  EXPECT_EQ(c.stride[0], 12);
  EXPECT_EQ(c.stride[1], 4);
  EXPECT_EQ(c.stride[2], 1);
  EXPECT_EQ(c.numel(), 24);
  EXPECT_EQ(c.span(), 24);
  EXPECT_TRUE(c.contiguous());
  EXPECT_EQ(c.shape_string(), "[2, 3, 4]");
  // A transposed pair of the last two axes: the same memory, not contiguous.
  const TensorView t = view({2, 4, 3}, {12, 1, 4});
  EXPECT_EQ(t.span(), 24);
  EXPECT_FALSE(t.contiguous());
  // Every other row of a [4, 8] buffer: ends at the last element of row 2.
  const TensorView s = view({2, 8}, {16, 1});
  EXPECT_EQ(s.span(), 24);
  EXPECT_EQ(s.numel(), 16);
  // One empty axis empties the view whatever the strides.
  EXPECT_EQ(view({3, 0, 5}, {100, 10, 1}).span(), 0);
  EXPECT_EQ(view({3, 0, 5}, {100, 10, 1}).numel(), 0);
  // Size-1 axes take any stride.
  EXPECT_TRUE(view({1, 4}, {999, 1}).contiguous());
  EXPECT_EQ(view({1, 4}, {999, 1}).span(), 4);
}

}  // namespace
}  // namespace pav::kernels
