import argparse, os, time, torch
def args(default_out):
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("-o", "--output", default=default_out)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    return a
