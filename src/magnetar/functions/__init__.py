"""magnetar.functions"""
