"""Everything that fits a program to data: prompt optimizers, controller training, conformal calibration."""
