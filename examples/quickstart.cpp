// The README's ten-line example, built and run by ctest so it stays true.
#include <spool/spool.hpp>

#include <cstdio>

int main() {
  using namespace spool;
  Graph g("mlp");
  Tensor x = input(g, "x", DType::F32, {8, 64});
  Tensor w1 = weight(g, "w1", DType::F32, {128, 64}), w2 = weight(g, "w2", DType::F32, {64, 128});
  output("y", x + nn::linear(nn::silu(nn::linear(nn::rms_norm(x, weight(g, "n", DType::F32, {64})), w1)), w2));
  std::string text = print_graph(g);                                    // the HLIR text form
  auto outputs = interp::run(g, interp::random_inputs(g, /*seed=*/1));  // reference interpreter

  std::printf("%s", text.c_str());
  std::printf("y: %s\n", shape_str(outputs.at("y").shape()).c_str());
  return 0;
}
