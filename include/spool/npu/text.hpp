#pragma once
// Text form of NPU programs. print() and parse() round-trip exactly:
// parse(print(p)) == p, and print(parse(text)) == text for printed text.
//
//   program "gemm" spad 262144
//   buffer @x : f32[64, 32] input
//   buffer @xv : f32[2048] alias @x + 0
//   kernel "k0" after "other" {
//     spad %A : f32[512] x2 at 0
//     for m in 0..4 {
//       dma.load [min(16, 64 - 16*m), 32] %A{m}[0 : 32, 1] <- @x[512*m : 32, 1] tag 0
//       matmul [16, 32, 8] %C[0 : 8] += %A{m}[0 : 32], %B[0 : 8] tb
//       vector "relu" [16, 8] {
//         %c = load %C[0 : 8] : f32
//         %z = const 0 : f32
//         %r = max %c, %z : f32
//         store %C[0 : 8], %r
//       }
//       wait 0
//     }
//   }

#include <spool/npu/kernel.hpp>
#include <spool/support/diagnostic.hpp>

#include <string>
#include <string_view>

namespace spool::npu {

std::string print(const Program& program);
std::string print_affine(const Affine& affine, const std::vector<std::string>& var_names);
std::string print_extent(const Extent& extent, const std::vector<std::string>& var_names);

[[nodiscard]] Result<Program> parse(std::string_view text, const std::string& filename = "<input>");

}  // namespace spool::npu
