"""magnetar.proto"""
