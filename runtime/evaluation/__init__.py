"""The evaluation stage: TFLite's task evaluation tools (image classification top-K, COCO detection mAP)."""
