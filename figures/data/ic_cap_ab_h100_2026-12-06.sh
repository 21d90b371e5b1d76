set -u
export PYTHONPATH="$PWD:$PWD/dev/sparse_fusion" PYTHONUNBUFFERED=1
mk() { rm -rf /tmp/$1 && mkdir -p /tmp/$1 && cp -r tiers /tmp/$1/ && find /tmp/$1 -name __pycache__ -prune -exec rm -rf {} + ;
  sed -i "s/(rows.IC, False): 96}/(rows.IC, False): $2}/" /tmp/$1/tiers/t3_triton_fused/sparse_fusion.py &&
  grep -q "(rows.IC, False): $2}" /tmp/$1/tiers/t3_triton_fused/sparse_fusion.py && tar -cf /tmp/$1.tar -C /tmp/$1 tiers; }
mk pkg 96 && mk c88 88 && mk c80 80 || exit 1
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c 'import torch,triton,numpy;print(torch.__version__,triton.__version__,numpy.__version__)'; } > $OUT/ic_cap_ab.env.txt
timeout 450 python3 dev/sparse_fusion/ab_commit.py /tmp/pkg.tar,/tmp/c88.tar,/tmp/c80.tar $OUT/ic_cap_ab.json \
  powerlaw:1000000:spic0_sptrsv:sparse_fusion,poisson3d:100:spic0_sptrsv:sparse_fusion 2>&1 | tee $OUT/ic_cap_ab.log | cut -c1-300 | tail -4
