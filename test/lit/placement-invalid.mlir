// Placements are checked against the tensor they describe and the mesh they
// name; every error points at the offending type or op.
// RUN: twill-opt %s -split-input-file -verify-diagnostics

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}

// expected-error @+1 {{placement entry 1 shards dim 2 of a tensor of rank 2}}
func.func @shard_dim_out_of_range(%x: tensor<8x16xf32, #twill.placement<@mesh, [replicate, shard<2>]>>) {
  return
}

// -----

// expected-error @+1 {{shard dim must be non-negative, got -1}}
func.func @negative_shard_dim(%x: tensor<8x16xf32, #twill.placement<@mesh, [shard<-1>, replicate]>>) {
  return
}

// -----

// expected-error @+1 {{placement needs one entry per mesh axis}}
func.func @no_entries(%x: tensor<8x16xf32, #twill.placement<@mesh, []>>) {
  return
}

// -----

// expected-error @+1 {{unknown placement 'split'; expected 'shard<dim>', 'replicate' or 'partial<sum>'}}
func.func @unknown_placement(%x: tensor<8x16xf32, #twill.placement<@mesh, [split, replicate]>>) {
  return
}

// -----

// expected-error @+1 {{unknown partial reduction 'max'; expected 'sum'}}
func.func @unknown_reduction(%x: tensor<8x16xf32, #twill.placement<@mesh, [partial<max>, replicate]>>) {
  return
}

// -----

twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 4]}

func.func @wrong_entry_count(%x: tensor<8x16xf32, #twill.placement<@mesh, [shard<0>]>>) {
  // expected-error @+1 {{placement has 1 entries but mesh @mesh has 2 axes ["dp", "tp"]}}
  %0 = twill.scale %x by 2.0 : tensor<8x16xf32, #twill.placement<@mesh, [shard<0>]>>
  return
}

// -----

func.func @unknown_mesh(%x: tensor<8x16xf32, #twill.placement<@nowhere, [replicate]>>) {
  // expected-error @+1 {{placement refers to unknown mesh @nowhere}}
  %0 = twill.scale %x by 2.0 : tensor<8x16xf32, #twill.placement<@nowhere, [replicate]>>
  return
}

// -----

// expected-error @+1 {{has 2 axes but 1 sizes}}
twill.mesh @mesh {axes = ["dp", "tp"], shape = [2]}

// -----

// expected-error @+1 {{axis 'tp' appears twice}}
twill.mesh @mesh {axes = ["tp", "tp"], shape = [2, 2]}

// -----

// expected-error @+1 {{axis sizes must be positive, got 0}}
twill.mesh @mesh {axes = ["dp", "tp"], shape = [2, 0]}

// -----

// expected-error @+1 {{needs at least one axis}}
twill.mesh @mesh {axes = [], shape = []}

// -----

// A mesh gives each axis at most one role, and each role to one axis.
// expected-error @+1 {{has 2 axes but 1 roles}}
twill.mesh @short {axes = ["dp", "tp"], shape = [2, 4], roles = [#twill.axis<data>]}

// -----

// expected-error @+1 {{gives two axes the role data}}
twill.mesh @twice {axes = ["a", "b"], shape = [2, 4], roles = [#twill.axis<data>, #twill.axis<data>]}
