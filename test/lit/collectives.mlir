// The collectives round-trip and check their result shapes against the
// axis they run on.
// RUN: twill-opt %s -split-input-file -verify-diagnostics | twill-opt | FileCheck %s

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<2x16x8xf32>, %big: tensor<2x64x8xf32>) {
  // CHECK: twill.all_gather %{{.*}} over @mesh["tp"] dim 1 : tensor<2x16x8xf32> -> tensor<2x64x8xf32>
  %0 = twill.all_gather %x over @mesh["tp"] dim 1 : tensor<2x16x8xf32> -> tensor<2x64x8xf32>
  // CHECK: twill.reduce_scatter %{{.*}} over @mesh["tp"] dim 1 : tensor<2x64x8xf32> -> tensor<2x16x8xf32>
  %1 = twill.reduce_scatter %big over @mesh["tp"] dim 1 : tensor<2x64x8xf32> -> tensor<2x16x8xf32>
  // CHECK: twill.all_reduce %{{.*}} over @mesh["dp"] : tensor<2x16x8xf32>
  %2 = twill.all_reduce %x over @mesh["dp"] : tensor<2x16x8xf32>
  // CHECK: twill.all_to_all %{{.*}} over @mesh["tp"] split 2 concat 1 : tensor<2x16x8xf32> -> tensor<2x64x2xf32>
  %3 = twill.all_to_all %x over @mesh["tp"] split 2 concat 1 : tensor<2x16x8xf32> -> tensor<2x64x2xf32>
  // CHECK: twill.local_slice %{{.*}} over @mesh["tp"] dim 1 : tensor<2x64x8xf32> -> tensor<2x16x8xf32>
  %4 = twill.local_slice %big over @mesh["tp"] dim 1 : tensor<2x64x8xf32> -> tensor<2x16x8xf32>
  return
}

// Sizes that do not divide by the axis: blocks of ceil(size / ranks), the
// last one padded; a gather drops the padding.
// CHECK-LABEL: func.func @uneven
func.func @uneven(%x: tensor<2x8x8xf32>, %y: tensor<2x30x8xf32>) {
  // CHECK: twill.all_gather %{{.*}} -> tensor<2x30x8xf32>
  %0 = twill.all_gather %x over @mesh["tp"] dim 1 : tensor<2x8x8xf32> -> tensor<2x30x8xf32>
  // CHECK: twill.reduce_scatter %{{.*}} -> tensor<2x8x8xf32>
  %1 = twill.reduce_scatter %y over @mesh["tp"] dim 1 : tensor<2x30x8xf32> -> tensor<2x8x8xf32>
  // CHECK: twill.local_slice %{{.*}} -> tensor<2x8x8xf32>
  %2 = twill.local_slice %y over @mesh["tp"] dim 1 : tensor<2x30x8xf32> -> tensor<2x8x8xf32>
  return
}

// -----

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}

func.func @wrong_gather(%x: tensor<2x16x8xf32>) {
  // expected-error @+1 {{result must have shape [2, 64, 8], got [2, 32, 8]}}
  %0 = twill.all_gather %x over @mesh["tp"] dim 1 : tensor<2x16x8xf32> -> tensor<2x32x8xf32>
  return
}

// -----

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}

func.func @unknown_axis(%x: tensor<2x16x8xf32>) {
  // expected-error @+1 {{mesh @mesh has no axis "pp" (it has ["dp", "tp"])}}
  %0 = twill.all_reduce %x over @mesh["pp"] : tensor<2x16x8xf32>
  return
}

// -----

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}

func.func @short_scatter(%x: tensor<2x6x8xf32>) {
  // expected-error @+1 {{result must have shape [2, 2, 8], got [2, 1, 8]}}
  %0 = twill.reduce_scatter %x over @mesh["tp"] dim 1 : tensor<2x6x8xf32> -> tensor<2x1x8xf32>
  return
}

// -----

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}

func.func @uneven_exchange(%x: tensor<2x16x6xf32>) {
  // expected-error @+1 {{split dim 2 of size 6 does not split over the 4 ranks of "tp"}}
  %0 = twill.all_to_all %x over @mesh["tp"] split 2 concat 1 : tensor<2x16x6xf32> -> tensor<2x64x1xf32>
  return
}

// -----

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}

func.func @bad_dim(%x: tensor<2x16x8xf32>) {
  // expected-error @+1 {{dim 3 is not a dim of a 3-d tensor}}
  %0 = twill.all_gather %x over @mesh["tp"] dim 3 : tensor<2x16x8xf32> -> tensor<2x16x8xf32>
  return
}

// -----

func.func @no_mesh(%x: tensor<2x16x8xf32>) {
  // expected-error @+1 {{refers to unknown mesh @nowhere}}
  %0 = twill.all_reduce %x over @nowhere["dp"] : tensor<2x16x8xf32>
  return
}
